"""The stored Merkle tree, on both backends: tiles written by checkpoints, roots and
proofs that read a few rows, and a prune that leaves every remaining entry provable."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from overt.clock import now_iso
from overt.errors import NotFoundError
from overt.ledger import merkle, tree
from overt.ledger.checkpoints import dialect
from tests.backends import Raw
from tests.conftest import run
from tests.ledger.proofs_helpers import add_turns, make_signer


def chain_leaves(raw: Raw) -> list[bytes]:
    return [merkle.entry_leaf(h) for (h,) in raw.query("SELECT hash FROM audit_log ORDER BY seq")]


@pytest.mark.slow
def test_the_stored_tree_gives_the_root_of_the_chain_and_a_checkpoint_stores_its_tiles(
    ledger: Any, raw: Raw
) -> None:
    add_turns(ledger, 300)
    leaves = chain_leaves(raw)
    t = run(tree.fill(ledger.select, dialect(ledger)))
    assert t.root() == merkle.root(merkle.perfect_over(leaves), len(leaves))
    assert len(t.new_nodes) == len(leaves) // tree.TILE + 1  # the tiles and leaf 0
    run(ledger.record([], rows=t.new_nodes))
    stored = raw.query("SELECT level, first_leaf FROM merkle_nodes ORDER BY 1, 2")
    assert stored == [(0, 0), *((tree.TILE_LEVEL, i * tree.TILE)
                                for i in range(len(leaves) // tree.TILE))]


@pytest.mark.slow
def test_a_proof_reads_the_tiles_it_needs_not_the_ledger(ledger: Any, tmp_path: Path) -> None:
    add_turns(ledger, 1000)
    signer = make_signer(tmp_path)
    checkpoint, _ = signer.checkpoint(ledger)
    t = run(tree.open_tree(ledger.select, dialect(ledger), checkpoint.size, leaves=[1500]))
    assert len(t.leaves) <= 2 * tree.TILE  # its own tile and the partial one at the end
    proof = t.inclusion(1500)
    leaf = t.leaves[1500]
    assert merkle.verify_inclusion(leaf, 1500, checkpoint.size, proof, checkpoint.root)


def test_a_prune_keeps_the_root_and_every_remaining_entry_provable(
    ledger: Any, raw: Raw
) -> None:
    add_turns(ledger, 200)
    before = chain_leaves(raw)
    record = run(ledger.prune(now_iso()))
    assert record.removed_entries == len(before)
    add_turns(ledger, 5, prefix="after")
    total = int(raw.query("SELECT max(seq) FROM audit_log")[0][0])
    t = run(tree.open_tree(ledger.select, dialect(ledger), total, leaves=[total - 1]))
    assert t.root(len(before)) == merkle.root(merkle.perfect_over(before), len(before))
    assert merkle.verify_inclusion(t.leaves[total - 1], total - 1, total,
                                   t.inclusion(total - 1), t.root())


def test_a_proof_of_a_pruned_entry_is_refused(ledger: Any) -> None:
    add_turns(ledger, 50)
    run(ledger.prune(now_iso()))
    add_turns(ledger, 2, prefix="after")
    t = run(tree.open_tree(ledger.select, dialect(ledger), leaves=[3]))
    with pytest.raises(NotFoundError):
        t.inclusion(3)


def test_the_tree_table_is_append_only(ledger: Any, raw: Raw, tmp_path: Path) -> None:
    add_turns(ledger, 100)
    make_signer(tmp_path).checkpoint(ledger)
    for statement in ("UPDATE merkle_nodes SET hash = 'x'", "DELETE FROM merkle_nodes"):
        with pytest.raises(raw.append_only_error):
            raw.execute(statement)


def test_a_second_hash_for_a_subtree_is_never_used_and_the_next_checkpoint_names_it(
    ledger: Any, raw: Raw, tmp_path: Path
) -> None:
    from overt.ledger import checkpoints, proofs

    add_turns(ledger, 100)
    signer = make_signer(tmp_path)
    signer.checkpoint(ledger)
    raw.execute("INSERT INTO merkle_nodes (level, first_leaf, hash) VALUES (8, 0, ?)",
                ("00" * 32,))
    t = run(tree.fill(ledger.select, dialect(ledger)))
    assert t.bad == [(8, 0)] and t.root() == merkle.root(merkle.perfect_over(
        chain_leaves(raw)), t.size)
    with pytest.raises(checkpoints.SignedWithFindings, match="level 8, first leaf 0"):
        signer.checkpoint(ledger)
    checkpoint, note = signer.witnessed()[-1], sorted(signer.witness.glob("*"))[-1].read_text()
    found: list[str] = []
    proof = run(proofs.prove(ledger, "t7", note, checkpoint, signer.public, found=found))
    assert proofs.check(proofs.dump(proof).encode(), signer.public).entries == 3
    assert found == []  # the stored tile is ambiguous: read from the entries, never used


def test_a_prune_refuses_to_leave_a_planted_subtree_standing_in_for_what_it_removes(
    ledger: Any, raw: Raw
) -> None:
    from overt.errors import LedgerIntegrityError

    add_turns(ledger, 50)  # a prune now removes entries 1..150: (level 7, first leaf 0) first
    raw.execute("INSERT INTO merkle_nodes (level, first_leaf, hash) VALUES (7, 0, ?)",
                ("00" * 32,))
    with pytest.raises(LedgerIntegrityError, match="level 7, first leaf 0"):
        run(ledger.prune(now_iso()))
    assert raw.query("SELECT min(seq), count(*) FROM audit_log")[0] == (1, 150)


def counting_leaves(ledger: Any) -> tuple[Any, list[int]]:
    """``ledger.select``, counting the leaves (chain hashes) it reads."""
    counted: list[int] = []

    async def select(statement: str, params: Any = ()) -> Any:
        rows = await ledger.select(statement, params)
        if statement.startswith("SELECT seq, hash FROM audit_log WHERE seq >"):
            counted.append(len(rows))
        return rows
    return select, counted


@pytest.mark.slow
def test_a_routine_checkpoint_hashes_the_entries_since_the_last_not_the_ledger(
    ledger: Any, raw: Raw, tmp_path: Path
) -> None:
    from overt.ledger import checkpoints

    add_turns(ledger, 1000)  # 3,000 entries: 11 tiles and a part
    signer = make_signer(tmp_path)
    first, _ = signer.checkpoint(ledger)
    add_turns(ledger, 10)
    select, counted = counting_leaves(ledger)
    t = run(tree.extend(select, dialect(ledger), first.size + 30, first.size, first.root))
    assert t is not None and 0 < sum(counted) <= 1 + tree.TILE + 30
    leaves = chain_leaves(raw)[:first.size + 30]
    assert t.root() == merkle.root(merkle.perfect_over(leaves), len(leaves))
    assert t.bad == [] and [r[1]["first_leaf"] for r in t.new_nodes] == [
        i * tree.TILE for i in range(first.size // tree.TILE, len(leaves) // tree.TILE)]
    second, _ = signer.checkpoint(ledger)
    every = chain_leaves(raw)[:second.size]
    assert second.root == merkle.root(merkle.perfect_over(every), len(every))
    checkpoints.check_successor(first, second)


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["planted", "missing", "twice"])
def test_a_tile_under_the_signed_checkpoint_that_is_not_its_leaves_is_never_taken(
    ledger: Any, raw: Raw, tmp_path: Path, damage: str
) -> None:
    from overt.ledger import checkpoints

    add_turns(ledger, 300)  # 900 entries: 3 tiles and a part
    signer = make_signer(tmp_path)
    signer.checkpoint(ledger)
    raw.drop_guards()
    if damage != "twice":
        raw.execute("DELETE FROM merkle_nodes WHERE level = 8 AND first_leaf = 256")
    if damage != "missing":
        raw.execute("INSERT INTO merkle_nodes (level, first_leaf, hash) VALUES (8, 256, ?)",
                    ("ab" * 32,))
    add_turns(ledger, 5)
    if damage == "missing":  # nothing wrong stored: the tile is recomputed and stored
        checkpoint, _ = signer.checkpoint(ledger)
    else:
        with pytest.raises(checkpoints.SignedWithFindings, match="level 8, first leaf 256"):
            signer.checkpoint(ledger)
        checkpoint = signer.witnessed()[-1]
    leaves = chain_leaves(raw)[:checkpoint.size]
    assert checkpoint.root == merkle.root(merkle.perfect_over(leaves), len(leaves))


def test_an_entry_changed_under_the_signed_checkpoint_is_not_signed_over_and_verify_names_it(
    ledger: Any, raw: Raw, tmp_path: Path
) -> None:
    from overt.ledger import audit

    add_turns(ledger, 300)
    signer = make_signer(tmp_path)
    first, _ = signer.checkpoint(ledger)
    true_leaves = chain_leaves(raw)[:first.size]
    raw.drop_guards()
    raw.execute("UPDATE audit_log SET hash = 'sha256:' || upper(substr(hash, 8)) WHERE seq = 300")
    add_turns(ledger, 5)
    second, _ = signer.checkpoint(ledger)  # its tile is taken as stored: the true history
    now = [merkle.entry_leaf(h) for (h,) in raw.query(
        "SELECT hash FROM audit_log WHERE seq > ? AND seq <= ? ORDER BY seq",
        (first.size, second.size))]
    every = true_leaves + now
    assert second.root == merkle.root(merkle.perfect_over(every), len(every))
    chain = run(ledger.verify(check_bodies=False))
    report = run(audit.verify_against(ledger, chain, signer.witnessed()))
    assert not report.ok
