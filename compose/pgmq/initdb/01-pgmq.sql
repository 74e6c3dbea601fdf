-- Runs once, when the data volume is first initialised, in POSTGRES_DB (crossbench).
CREATE EXTENSION IF NOT EXISTS pgmq;
