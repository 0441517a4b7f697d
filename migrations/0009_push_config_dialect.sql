-- The dialect a push config was registered in (issue 19): a 0.3 client's webhook gets the 0.3
-- payload (the Task), a 1.0 client's the StreamResponse. Configs stored before are 1.0's.
ALTER TABLE push_configs ADD COLUMN dialect text NOT NULL DEFAULT '1.0'
    CHECK (dialect IN ('1.0', '0.3'));
