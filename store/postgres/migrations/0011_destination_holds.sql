-- A 429 whose Retry-After asked for centuries held its destination back that long (a hold
-- until 2318 stopped every request to the host). Holds are now capped by the steps'
-- retry.max_retry_after; a hold longer than a day left by the old code is ended here, so
-- that the host is asked again and, if it still answers 429, held back within the cap.
UPDATE destination_buckets SET blocked_until = now() WHERE blocked_until > now() + interval '1 day';
