-- API keys (issue 7). Each key is a principal `key:<id>`. Only the SHA-256 of the key is
-- stored: `a2a-gateway keys create` prints the key once and never again. Keys are random
-- (>= 244 bits), so an index lookup by hash leaks nothing useful about a key through timing.
-- Revoking keeps the row (audit; the id cannot be reused by accident).

CREATE TABLE api_keys (
    id          text COLLATE "C" PRIMARY KEY,
    key_sha256  bytea NOT NULL UNIQUE,
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);
