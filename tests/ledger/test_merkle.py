"""The Merkle tree: RFC 6962/9162's reference vectors, and every proof of small trees."""

from __future__ import annotations

import pytest

from overt.ledger import merkle

# The Certificate Transparency reference leaves and tree heads (RFC 6962 test data,
# as Go's transparency-dev/merkle and Trillian carry them).
DATA = [bytes.fromhex(h) for h in (
    "", "00", "10", "2021", "3031", "40414243", "5051525354555657",
    "606162636465666768696a6b6c6d6e6f")]
ROOTS = [
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
]
LEAVES = [merkle.leaf_hash(d) for d in DATA]
INCLUSION = {
    (0, 8): ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
             "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
             "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"],
    (5, 8): ["bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
             "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
             "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"],
}
CONSISTENCY = {
    (2, 5): ["5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
             "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"],
}


def naive_mth(leaves: list[bytes]) -> bytes:
    """RFC 9162 §2.1.1 as written, for comparison."""
    if not leaves:
        return merkle.EMPTY_ROOT
    if len(leaves) == 1:
        return leaves[0]
    k = merkle.split(len(leaves))
    return merkle.node_hash(naive_mth(leaves[:k]), naive_mth(leaves[k:]))


MANY = [merkle.leaf_hash(i.to_bytes(2, "big")) for i in range(70)]


def test_the_roots_match_the_rfc_6962_reference_tree_heads() -> None:
    for size in range(len(LEAVES) + 1):
        perfect = merkle.perfect_over(LEAVES[:size])
        assert merkle.root(perfect, size).hex() == ROOTS[size]


def test_inclusion_proofs_match_the_reference_and_verify() -> None:
    perfect = merkle.perfect_over(LEAVES)
    for (index, size), expected in INCLUSION.items():
        proof = merkle.inclusion_proof(perfect, index, size)
        assert [p.hex() for p in proof] == expected
        assert merkle.verify_inclusion(LEAVES[index], index, size, proof,
                                       bytes.fromhex(ROOTS[size]))


def test_consistency_proofs_match_the_reference_and_verify() -> None:
    perfect = merkle.perfect_over(LEAVES)
    for (old, new), expected in CONSISTENCY.items():
        proof = merkle.consistency_proof(perfect, old, new)
        assert [p.hex() for p in proof] == expected
        assert merkle.verify_consistency(old, new, bytes.fromhex(ROOTS[old]),
                                         bytes.fromhex(ROOTS[new]), proof)


def test_the_tree_splits_at_the_largest_power_of_two_below_n() -> None:
    assert [merkle.split(n) for n in (2, 3, 4, 5, 8, 9, 1000)] == [1, 2, 2, 4, 4, 8, 512]
    for size in range(len(MANY) + 1):
        assert merkle.root(merkle.perfect_over(MANY), size) == naive_mth(MANY[:size])


def test_every_inclusion_proof_of_small_trees_verifies_and_a_wrong_one_does_not() -> None:
    perfect = merkle.perfect_over(MANY)
    for size in range(1, 40):
        root = naive_mth(MANY[:size])
        for index in range(size):
            proof = merkle.inclusion_proof(perfect, index, size)
            assert merkle.verify_inclusion(MANY[index], index, size, proof, root)
            assert not merkle.verify_inclusion(MANY[index + 1], index, size, proof, root)
            assert not merkle.verify_inclusion(MANY[index], index + size, size, proof, root)
            if proof:
                assert not merkle.verify_inclusion(MANY[index], index, size, proof[:-1], root)
                bent = [*proof[:-1], bytes(32)]
                assert not merkle.verify_inclusion(MANY[index], index, size, bent, root)
            assert not merkle.verify_inclusion(MANY[index], index, size,
                                               [*proof, bytes(32)], root)


def test_every_consistency_proof_of_small_trees_verifies_and_a_wrong_one_does_not() -> None:
    perfect = merkle.perfect_over(MANY)
    for new in range(1, 40):
        new_root = naive_mth(MANY[:new])
        for old in range(1, new + 1):
            old_root = naive_mth(MANY[:old])
            proof = merkle.consistency_proof(perfect, old, new)
            assert merkle.verify_consistency(old, new, old_root, new_root, proof)
            assert not merkle.verify_consistency(old, new, new_root if old != new else bytes(32),
                                                 new_root, proof)
            if proof:
                assert not merkle.verify_consistency(old, new, old_root, new_root, proof[1:])
                assert not merkle.verify_consistency(old, new, old_root, new_root,
                                                     [bytes(32), *proof[1:]])


def test_a_proof_for_a_leaf_outside_the_tree_is_refused() -> None:
    perfect = merkle.perfect_over(MANY)
    with pytest.raises(ValueError):
        merkle.inclusion_proof(perfect, 5, 5)
    with pytest.raises(ValueError):
        merkle.consistency_proof(perfect, 0, 5)
    with pytest.raises(ValueError):
        merkle.consistency_proof(perfect, 6, 5)


def test_the_frontier_gives_the_root_at_every_size_and_restarts_from_its_edge() -> None:
    frontier = merkle.Frontier()
    assert frontier.root() == merkle.EMPTY_ROOT
    for size, leaf in enumerate(MANY, start=1):
        frontier.push(leaf)
        assert frontier.root() == naive_mth(MANY[:size])
    perfect = merkle.perfect_over(MANY)
    for size in range(len(MANY)):
        edge = [perfect(lo, n) for lo, n in merkle.decomposition(0, size)]
        resumed = merkle.Frontier(size, edge)
        for leaf in MANY[size:]:
            resumed.push(leaf)
        assert resumed.root() == naive_mth(MANY)


def test_a_frontier_with_the_wrong_number_of_edge_hashes_is_refused() -> None:
    with pytest.raises(ValueError):
        merkle.Frontier(3, [bytes(32)])


def test_the_decomposition_of_a_range_is_aligned_complete_subtrees() -> None:
    assert merkle.decomposition(0, 13) == [(0, 8), (8, 4), (12, 1)]
    assert merkle.decomposition(5, 16) == [(5, 1), (6, 2), (8, 8)]
    for lo in range(0, 40):
        for hi in range(lo, 70):
            parts = merkle.decomposition(lo, hi)
            assert sum(n for _, n in parts) == hi - lo
            assert all(start % n == 0 and n & (n - 1) == 0 for start, n in parts)


def test_an_entry_leaf_hashes_its_chain_hash_with_the_leaf_prefix() -> None:
    chain_hash = "sha256:" + "ab" * 32
    assert merkle.entry_leaf(chain_hash) == merkle.leaf_hash(chain_hash.encode("ascii"))
