-- Reserved: this number belongs to a schema change developed beside this one; it changes
-- nothing here and gives way to that change when both are merged.
SELECT 1;
