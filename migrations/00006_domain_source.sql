-- +goose Up

-- Earlier versions wrote the operator's list (WEBFETCH_ALLOWED_DOMAINS)
-- into this table at every start, marked added_by 'config', and never took
-- an entry out again: a host the operator removed from the list stayed
-- allowed. The operator's list now lives in memory only, so those rows go;
-- the entries a human approved (added_by names them) stay.
DELETE FROM domains WHERE added_by = 'config';

-- +goose Down
-- Nothing to restore: an older version writes the operator's list again
-- at its next start.
SELECT 1;
