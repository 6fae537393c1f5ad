"""The back office (issue #12, docs/integration.md): a read model projected from the log, the HTTP API over it
(``casino-ledger serve``), API keys with roles, exports and the pit boss's page.

* :mod:`.schema` — the read model's tables (SQLAlchemy Core) and the database URL;
* :mod:`.migrate` — the Alembic migrations shipped in :mod:`.migrations`, run programmatically;
* :mod:`.projector` — folds the log's records into the read model, its position in the same transaction;
* :mod:`.queries` — what the API and the command line read;
* :mod:`.roads` — the five baccarat scoreboard roads (pure);
* :mod:`.apikeys` — bearer API keys, hashed at rest in the keyring file;
* :mod:`.commands` — commands from the API appended to the embedded log as principal ``backoffice``;
* :mod:`.api` — the FastAPI application; :mod:`.exports` — CSV and JSON; :mod:`.cli` — the commands.
"""
