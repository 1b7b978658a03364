-- Reserved: this number belongs to a schema change made alongside this one.
SELECT 1;
