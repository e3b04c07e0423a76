"""The memory's index of trigrams: a search finds text inside words.

The word index (:mod:`.memory_search`) finds whole words and word beginnings; a
fragment from inside a word (``kron`` in ``Isokron``, ``サーバー`` in
``東京のサーバー``, which has no spaces to split on) is found through an index of
every three characters of each node's title and body. Word matches still rank
first: :mod:`overt.ledger.reads.memory_search` asks this index only for the places the
word matches leave in a result, and only with fragments of three characters or
more (see :func:`overt.ledger.reads.memory_search.fragments`).

SQLite: a contentless FTS5 table, ``memory_trigrams`` (``tokenize='trigram'``,
case-insensitive; title, body and the node's ``search_tags``, so a kind narrows
the match inside the index), with ``memory_search``'s rowids (``slot << 40 |
seq``), so a search within one actor reads that actor's rowid range only, and
ranks inside the index (``bm25``) so that only the rows kept are read. It holds
current revisions only: the trigger that indexes a node in the word index
(``memory_search_insert``, :mod:`.memory_search`) indexes it here too, and takes
the revision it supersedes out.

PostgreSQL: ``memory_trigrams``, partitioned by a hash of the actor as
``memory_search`` is (16 partitions), holds each current revision's title and body
(with its actor, kind and time), and a GIN index of the trigrams (``pg_trgm``'s
``gin_trgm_ops``) over ``title || E'\\n' || body``, which ``ILIKE`` uses: a search
within one actor reads that actor's partition, current revisions only. A trigger on
``memory_nodes`` adds the row and deletes the superseded revision's; its function is
the owner's, ``SECURITY DEFINER`` (:mod:`.derived`: the writer role inserts
nothing here, and gets ``SELECT`` only). ``pg_trgm`` is used where it is installed
already (in any schema), else created in schema ``overt_extensions``, not in the
ledger's own: dropping a ledger's schema must not take another ledger's index with
it. Creating it needs ``CREATE`` on the database (``pg_trgm`` is a trusted
extension); a ledger owner without it is stopped with a message saying what to
run, and nothing of the ledger is made. A server without the extension at
all (no ``postgresql-contrib``) is stopped the same way.
"""

from __future__ import annotations

from overt.ledger.schema.memory_search import partitions

EXTENSION_SCHEMA = "overt_extensions"
"""Where the baseline creates ``pg_trgm`` when the database does not have it."""

TEXT = "(title || E'\\n' || body)"
"""The expression of ``memory_trigrams`` the PostgreSQL index holds (a query states it
word for word to use the index)."""

_SQLITE = """
CREATE VIRTUAL TABLE memory_trigrams USING fts5(
    title, body, search_tags, content='', columnsize=0, tokenize='trigram'
);
"""

_NEEDS = ("overt''s memory search needs PostgreSQL''s pg_trgm extension (to find text "
          "inside words)")

_POSTGRES = f"""
CREATE TABLE memory_trigrams (
    node_id    TEXT NOT NULL,
    actor      TEXT NOT NULL,
    kind       TEXT NOT NULL,
    created_at TEXT NOT NULL,
    title      TEXT NOT NULL,
    body       TEXT NOT NULL,
    PRIMARY KEY (node_id, actor)
) PARTITION BY HASH (actor);
{partitions("memory_trigrams")}
CREATE FUNCTION overt_memory_trigrams() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO memory_trigrams (node_id, actor, kind, created_at, title, body)
        VALUES (NEW.id, NEW.actor, NEW.kind, NEW.created_at, NEW.title, NEW.body);
    IF NEW.supersedes IS NOT NULL THEN
        DELETE FROM memory_trigrams WHERE node_id = NEW.supersedes;
    END IF;
    RETURN NULL;
END $$;
REVOKE ALL ON FUNCTION overt_memory_trigrams() FROM PUBLIC;
CREATE TRIGGER memory_nodes_trigrams AFTER INSERT ON memory_nodes
    FOR EACH ROW EXECUTE FUNCTION overt_memory_trigrams();
DO $$
DECLARE
    found text;
BEGIN
    SELECT n.nspname INTO found FROM pg_extension e
        JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_trgm';
    IF found IS NULL THEN
        IF NOT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm') THEN
            RAISE EXCEPTION '{_NEEDS}, which this server does not have: install '
                'PostgreSQL''s contrib modules (Debian: postgresql-contrib) on the server, '
                'then open the ledger again';
        END IF;
        BEGIN
            CREATE SCHEMA IF NOT EXISTS {EXTENSION_SCHEMA};
            CREATE EXTENSION pg_trgm SCHEMA {EXTENSION_SCHEMA};
            GRANT USAGE ON SCHEMA {EXTENSION_SCHEMA} TO PUBLIC;
        EXCEPTION WHEN insufficient_privilege THEN
            RAISE EXCEPTION '{_NEEDS}, and role % may not create it in database %: as a '
                'superuser, or a role with CREATE on the database, run CREATE EXTENSION '
                'pg_trgm; (in any schema), then open the ledger again',
                current_user, current_database();
        END;
        found := '{EXTENSION_SCHEMA}';
    ELSIF NOT has_schema_privilege(found, 'USAGE') THEN
        RAISE EXCEPTION '{_NEEDS}, installed in schema %, which role % may not use: as '
            'its owner or a superuser, run GRANT USAGE ON SCHEMA % TO %; (or overt ledger '
            'setup-roles, which grants it), then open the ledger again',
            found, current_user, found, current_user;
    END IF;
    EXECUTE format('CREATE INDEX memory_trigrams_text ON memory_trigrams '
                   'USING GIN ({TEXT.replace("'", "''")} %I.gin_trgm_ops) '
                   'WITH (fastupdate = off)', found);
END $$;
"""


def sqlite() -> str:
    """SQLite's ``memory_trigrams`` (fed by :mod:`.memory_search`'s trigger)."""
    return _SQLITE


def postgres() -> str:
    """PostgreSQL's ``memory_trigrams``, its trigger, ``pg_trgm`` found or created, and
    the index."""
    return _POSTGRES
