-- PostgreSQL schema of the memory domain (issue 35): part of migration 1, in the order of
-- crates/store-pg/src/migrate.rs.
--
-- `search` is the row's full-text index entry: the words of text, kind and subject (in that
-- order, positions running on), lower-cased, as the store splits them (memory.rs: letters and
-- digits, the same rule a query is split by, so no server locale or text-search configuration
-- decides what a word is). SQLite keeps the same words in its FTS5 table `memories_fts`.
CREATE TABLE memories (
    memory_id     BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    text          TEXT NOT NULL,
    kind          TEXT NOT NULL,
    subject       TEXT NOT NULL,
    confidence    DOUBLE PRECISION,
    created_at_ms BIGINT NOT NULL,
    search        TSVECTOR NOT NULL,
    -- How many words `search` was made of (all of them, repeats included): BM25's |D|.
    words         INTEGER NOT NULL
);
CREATE INDEX memories_search ON memories USING GIN (search);
CREATE INDEX memories_recent ON memories (created_at_ms DESC, memory_id DESC);
