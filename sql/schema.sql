-- schema: every table of the warehouse, created if missing.
-- Grain is given per table. Timestamps are UTC, stored as TIMESTAMP (no zone).
-- Public tables (documented in README): request_scores, recall_at_k, window_metrics,
-- quarantine, miss_causes, drift_events, alerts. The others are internal and may change.

-- One row per input file (and version, for gold sets and manifests) ever ingested; a file
-- whose content hash and options are unchanged is skipped.
CREATE TABLE IF NOT EXISTS ingest_files (
    kind          VARCHAR NOT NULL,   -- logs | gold | index
    source        VARCHAR NOT NULL,   -- absolute path
    version       VARCHAR,            -- gold-set or index version; NULL for logs
    content_hash  VARCHAR NOT NULL,
    options       VARCHAR NOT NULL,   -- ingest options that change the outcome
    n_read        BIGINT  NOT NULL,   -- records read = n_loaded + n_quarantined
    n_loaded      BIGINT  NOT NULL,
    n_quarantined BIGINT  NOT NULL
);

-- One row per logged request (request_id is unique). The logged candidates (beyond k too)
-- stay with their request as one list, in logged order, over all retrieval steps.
CREATE TABLE IF NOT EXISTS requests (
    request_id    VARCHAR   NOT NULL,
    timestamp     TIMESTAMP NOT NULL,
    query         VARCHAR   NOT NULL,
    query_norm    VARCHAR,              -- NFKC, casefold, collapsed whitespace; set when no gold_id
    gold_id       VARCHAR,
    index_version VARCHAR   NOT NULL,
    index_size    BIGINT,
    k             INTEGER   NOT NULL,   -- chunks served to the generator (per step)
    n_steps       INTEGER   NOT NULL,   -- 1 for a plain `retrieved` list
    session_id    VARCHAR,
    turn          INTEGER,
    tags          MAP(VARCHAR, VARCHAR),
    retrieved     STRUCT(step INTEGER, "position" INTEGER, chunk_id VARCHAR, rank INTEGER,
                         score DOUBLE, text VARCHAR)[] NOT NULL,
    chunk_ids     VARCHAR[],            -- distinct logged chunk IDs, best place first
    chunk_ranks   INTEGER[],            -- best place of each in its step's ranking (1 = top),
                                        -- over all steps; ties in logged rank go by list order
                                        -- Both NULL when the request logged one list in
                                        -- ranking order, no chunk twice (most do): its IDs are
                                        -- then retrieved's, at places 1, 2, 3, ... Read them
                                        -- through the view ranked_requests.
    source        VARCHAR   NOT NULL,
    line          BIGINT    NOT NULL
);

-- Warehouses written before the chunk IDs were stored once hold both lists on every request.
ALTER TABLE requests ALTER COLUMN chunk_ids DROP NOT NULL;
ALTER TABLE requests ALTER COLUMN chunk_ranks DROP NOT NULL;

-- Every request with its ranking: chunk_ids and chunk_ranks as stored, or, where they are
-- NULL, read from retrieved in list order.
CREATE OR REPLACE VIEW ranked_requests AS
SELECT * REPLACE (
    coalesce(chunk_ids, list_transform(retrieved, lambda x: x.chunk_id)) AS chunk_ids,
    coalesce(chunk_ranks, range(1, len(retrieved) + 1)::INTEGER[]) AS chunk_ranks)
FROM requests;

-- Identical re-deliveries of a loaded request from other lines or files: not loaded again,
-- kept so the request survives when the file that first delivered it changes.
CREATE TABLE IF NOT EXISTS request_copies (
    request_id VARCHAR NOT NULL,
    source     VARCHAR NOT NULL,
    line       BIGINT  NOT NULL
);

-- One row per golden per gold-set version.
CREATE TABLE IF NOT EXISTS goldens (
    gold_version   VARCHAR NOT NULL,
    gold_id        VARCHAR NOT NULL,
    question       VARCHAR,
    question_norm  VARCHAR,
    reference      VARCHAR,
    gold_chunk_ids VARCHAR[],
    gold_passages  VARCHAR[],
    claims         VARCHAR[]
);

-- One row per gold-set version; seq orders versions by load (newest is the default).
CREATE TABLE IF NOT EXISTS gold_versions (
    gold_version VARCHAR NOT NULL,
    seq          BIGINT  NOT NULL,
    source       VARCHAR NOT NULL,
    content_hash VARCHAR NOT NULL,
    n_goldens    BIGINT  NOT NULL
);

-- The index version whose chunk IDs the gold set names (`ingest gold --index-version`); NULL:
-- the indexes that served before each rebuild (its IDs are carried to rebuilt indexes).
ALTER TABLE gold_versions ADD COLUMN IF NOT EXISTS index_version VARCHAR;

-- Index manifest: one row per chunk per index version.
CREATE TABLE IF NOT EXISTS index_chunks (
    index_version VARCHAR NOT NULL,
    chunk_id      VARCHAR NOT NULL,
    content_hash  VARCHAR,
    text          VARCHAR
);

-- Public. One row per input record that could not be loaded.
CREATE TABLE IF NOT EXISTS quarantine (
    source  VARCHAR NOT NULL,   -- the file
    line    BIGINT  NOT NULL,   -- 1-based line (JSONL/CSV) or row (Parquet)
    reason  VARCHAR NOT NULL,
    raw     VARCHAR,            -- the record as read (truncated to 64 KiB)
    kind    VARCHAR NOT NULL,   -- logs | gold | index
    version VARCHAR             -- gold-set or index version the file was loaded as
);

-- Public. One row per request and route.
CREATE TABLE IF NOT EXISTS request_scores (
    request_id    VARCHAR   NOT NULL,
    timestamp     TIMESTAMP NOT NULL,
    gold_id       VARCHAR,
    gold_version  VARCHAR,
    index_version VARCHAR   NOT NULL,
    route         VARCHAR   NOT NULL,   -- ids | passages | claims
    k             INTEGER   NOT NULL,   -- served k
    needed        INTEGER,              -- distinct gold items a correct answer needed
    covered       INTEGER,              -- of those, found in the served top k
    recall        DOUBLE,               -- covered / needed; NULL unless status = 'scored'
    full_coverage BOOLEAN,              -- covered = needed; NULL unless scored
    precision     DOUBLE,               -- served chunks holding a needed item / distinct served;
                                        -- NULL if none served, or on claims (no chunk holds a
                                        -- claim: the judge reads the context whole)
    status        VARCHAR   NOT NULL    -- scored | no_gold_match | no_evidence (passages and
                                        -- claims also no_context_text, claims also
                                        -- judge_failed | not_judged)
);

-- The counts behind recall, precision and hit at every cutoff of one scored request, as
-- parallel lists (one row per request keeps scoring fast); the view recall_at_k derives them.
CREATE TABLE IF NOT EXISTS request_cutoffs (
    request_id VARCHAR   NOT NULL,
    route      VARCHAR   NOT NULL,
    needed     INTEGER   NOT NULL,   -- gold items the answer needed
    cutoffs    INTEGER[] NOT NULL,
    covered    INTEGER[] NOT NULL,   -- needed items within the top min(cutoff, k); NULL where
                                     -- the route did not measure the cutoff (claims below the
                                     -- whole served context)
    served     INTEGER[] NOT NULL,   -- distinct chunks within the top min(cutoff, k)
    relevant   INTEGER[]             -- of those, chunks holding at least one needed item; NULL
                                     -- when undefined (claims)
);

-- Added after the first warehouses were written: their rows get NULL (precision unknown) until
-- the next run rescores their days (pipeline.state finds them stale: score_windows.route_inputs
-- is NULL too).
ALTER TABLE request_cutoffs ADD COLUMN IF NOT EXISTS relevant INTEGER[];

-- Public. One row per scored request, route and cutoff k the route measured. The served k
-- caps every cutoff, so candidates beyond k never count and a list shorter than the cutoff
-- keeps its full value. The claims route measures a request only from the cutoff that takes in
-- its whole served context on: below that it has no row (not measured, never 0). precision
-- (served chunks holding a needed item / distinct served chunks) is NULL when nothing was
-- served up to the cutoff, and on the claims route; hit is Success@k (any needed item in the
-- top k), a different metric from recall.
CREATE OR REPLACE VIEW recall_at_k AS
SELECT request_id, route, k, covered / needed AS recall,
       relevant / nullif(served, 0) AS precision, covered > 0 AS hit
FROM (
    SELECT request_id, route, needed,
           unnest(cutoffs) AS k, unnest(covered) AS covered, unnest(served) AS served,
           unnest(relevant) AS relevant
    FROM request_cutoffs
)
WHERE covered IS NOT NULL;

-- Gold chunk IDs carried to a rebuilt index by content (pipeline/rebuild.py, written by
-- sql/carry_gold_ids.sql): a request served by index_version compares each gold chunk as the
-- IDs carried here (sql/route_ids.sql). One row per gold version x index version x gold chunk
-- x chunk compared as (several when the new index holds that content more than once).
CREATE TABLE IF NOT EXISTS carried_gold_ids (
    gold_version     VARCHAR   NOT NULL,
    index_version    VARCHAR   NOT NULL,   -- the rebuilt index
    gold_chunk_id    VARCHAR   NOT NULL,   -- as the gold set names it
    carried_chunk_id VARCHAR,              -- compared as this ID; NULL when gone
    how              VARCHAR   NOT NULL,   -- same_id | content_hash | gone | unknown
    from_version     VARCHAR,              -- whose manifest gave the old content; NULL: unknown
    live_from        TIMESTAMP NOT NULL    -- when index_version went live (UTC)
);
-- The carried IDs apply to the requests of index_version from this instant on, NULL: to every
-- one. Set on a rollback to an index that served before the rebuild it replaced was recorded
-- and never went live as a rebuild itself: what it served before (its first stint, before any
-- rebuild) keeps comparing the gold IDs as they are.
ALTER TABLE carried_gold_ids ADD COLUMN IF NOT EXISTS served_from TIMESTAMP;

-- The index rebuilds recorded by `recallwatch rebuild` (pipeline/rebuild.py): which index went
-- live when. Every gold set loaded later is carried to each of them, also one loaded after
-- the rebuild was recorded without any. One row per rebuilt index version.
CREATE TABLE IF NOT EXISTS rebuilds (
    index_version VARCHAR   PRIMARY KEY,
    live_from     TIMESTAMP NOT NULL    -- when index_version went live (UTC)
);

-- Warehouses from before this table recorded a rebuild only as its carried rows.
INSERT INTO rebuilds
SELECT index_version, min(live_from) FROM carried_gold_ids
WHERE index_version NOT IN (SELECT index_version FROM rebuilds)
GROUP BY index_version;

-- A gold set loaded with `ingest gold --index-version V` names the chunks of index V: its
-- chunk IDs are compared as they are on requests V served, and by content on every other
-- index with a manifest (written by sql/carry_named_gold.sql; rebuilds never carry it). One
-- row per gold version x other index version x gold chunk x chunk compared as, as in
-- carried_gold_ids.
CREATE TABLE IF NOT EXISTS named_gold_ids (
    gold_version     VARCHAR NOT NULL,
    index_version    VARCHAR NOT NULL,   -- an index other than the one the gold set names
    gold_chunk_id    VARCHAR NOT NULL,   -- as the gold set names it
    carried_chunk_id VARCHAR,            -- compared as this ID; NULL when gone
    how              VARCHAR NOT NULL,   -- same_id | content_hash | gone | unknown
    from_version     VARCHAR NOT NULL    -- the index the gold set names
);

-- Public. One row per missing gold chunk of a scored request.
CREATE TABLE IF NOT EXISTS miss_causes (
    request_id    VARCHAR NOT NULL,
    route         VARCHAR NOT NULL,
    gold_version  VARCHAR NOT NULL,
    gold_id       VARCHAR NOT NULL,
    index_version VARCHAR NOT NULL,
    chunk_id      VARCHAR NOT NULL,
    cause         VARCHAR NOT NULL,   -- not_in_index | beyond_k | not_retrieved
    rank          INTEGER             -- place in the ranking (1 = top) when beyond_k
);

-- Public. One row per window x slice x route x cutoff k x gold version.
CREATE TABLE IF NOT EXISTS window_metrics (
    window_start       TIMESTAMP NOT NULL,
    window_end         TIMESTAMP NOT NULL,
    grain              VARCHAR   NOT NULL,   -- day | hour
    slice              VARCHAR   NOT NULL,   -- all | index_version=X | tag=value
    route              VARCHAR   NOT NULL,
    k                  INTEGER   NOT NULL,
    gold_version       VARCHAR   NOT NULL,
    n                  BIGINT    NOT NULL,   -- scored requests
    n_sessions         BIGINT    NOT NULL,   -- clusters used by the interval
    mean_recall        DOUBLE,
    ci_low             DOUBLE,
    ci_high            DOUBLE,
    ci_method          VARCHAR,              -- adjusted_t | cluster_adjusted_t | wilson | cluster_wilson
    mean_precision     DOUBLE,
    pass_mark          DOUBLE    NOT NULL,
    pass_rate          DOUBLE,
    pass_ci_low        DOUBLE,
    pass_ci_high       DOUBLE,
    full_coverage_rate DOUBLE,
    fc_ci_low          DOUBLE,
    fc_ci_high         DOUBLE,
    index_versions     VARCHAR[],
    max_index_size     BIGINT,
    n_excluded         BIGINT    NOT NULL,   -- requests in the window and slice not scored
    rate_ci_method     VARCHAR               -- wilson | cluster_wilson (pass and full coverage)
);

-- Added after the first warehouses were written: their rows get NULL and are re-aggregated by
-- the next run (pipeline.state finds them stale).
ALTER TABLE window_metrics ADD COLUMN IF NOT EXISTS rate_ci_method VARCHAR;

-- The sufficient statistics behind each window_metrics row, kept for the drift step: pooling
-- baseline windows and the drift tests need sums, not intervals. Written and voided with
-- window_metrics (same key). Cluster sums are per session (a request without one is its own
-- cluster); max_size is the largest session.
CREATE TABLE IF NOT EXISTS window_sums (
    window_start       TIMESTAMP NOT NULL,
    grain              VARCHAR   NOT NULL,
    slice              VARCHAR   NOT NULL,
    route              VARCHAR   NOT NULL,
    k                  INTEGER   NOT NULL,
    gold_version       VARCHAR   NOT NULL,
    n                  BIGINT    NOT NULL,
    n_clusters         BIGINT    NOT NULL,
    any_session        BOOLEAN   NOT NULL,
    recall_sum         DOUBLE    NOT NULL,
    recall_cluster_sq  DOUBLE    NOT NULL,
    recall_cluster_cross DOUBLE  NOT NULL,
    size_sq            DOUBLE    NOT NULL,
    max_size           BIGINT    NOT NULL,
    pass_sum           DOUBLE    NOT NULL,
    pass_cluster_sq    DOUBLE    NOT NULL,
    pass_cluster_cross DOUBLE    NOT NULL,
    full_sum           DOUBLE    NOT NULL,
    full_cluster_sq    DOUBLE    NOT NULL,
    full_cluster_cross DOUBLE    NOT NULL
);

-- Added after the first warehouses were written: the requests measured at k that each index
-- version served in the window and slice (the drift step labels a window with the versions
-- serving its own requests). Rows of earlier warehouses get NULL and their days are
-- re-aggregated by the next run (sql/stale_metric_days.sql).
ALTER TABLE window_sums ADD COLUMN IF NOT EXISTS version_counts MAP(VARCHAR, BIGINT);

-- Added with the bias-reduced (CR2) intervals of a window where a session holds more than one
-- request: sum n_g^2 / (n - n_g) (sql/window_metrics.sql). A window of such sessions without
-- it was aggregated with CR1 and G - 1 degrees of freedom, and its day is re-aggregated by the
-- next run (sql/stale_metric_days.sql).
ALTER TABLE window_sums ADD COLUMN IF NOT EXISTS cr2_size_sq DOUBLE;

-- Added when drift and a rebuild's before/after took the bias-reduced (CR2) variance over pooled
-- days: per cluster size, the clusters of that size and their sums of S_g and S_g^2 for recall
-- and the pass and full-coverage indicators (sql/window_metrics.sql), which add up across days
-- where the CR2 weights 1 / (1 - n_g / n) do not. A window of sessions of more than one request
-- without it is re-aggregated by the next run (sql/stale_metric_days.sql); one without such
-- sessions needs none (its clusters are its requests).
ALTER TABLE window_sums ADD COLUMN IF NOT EXISTS size_hist STRUCT(
    size BIGINT, clusters BIGINT, recall_s DOUBLE, recall_sq DOUBLE, pass_s DOUBLE,
    pass_sq DOUBLE, full_s DOUBLE, full_sq DOUBLE)[];

-- Public. One row per window x slice x route x cutoff k x gold version x metric with a
-- baseline to compare with: the window's value, its baseline's, the interval of the
-- difference (window - baseline), the decision and the episode it belongs to. Written by the
-- drift step (pipeline/drift.py); voided from the first re-aggregated day onward, since a
-- window's baseline and the sequential test depend on the windows before it.
CREATE TABLE IF NOT EXISTS drift_events (
    window_start   TIMESTAMP NOT NULL,
    window_end     TIMESTAMP NOT NULL,
    grain          VARCHAR   NOT NULL,
    slice          VARCHAR   NOT NULL,
    route          VARCHAR   NOT NULL,
    k              INTEGER   NOT NULL,
    gold_version   VARCHAR   NOT NULL,
    metric         VARCHAR   NOT NULL,   -- mean_recall | pass_rate | full_coverage_rate
    index_version  VARCHAR,              -- the newest index version serving the window
    change_point   BOOLEAN   NOT NULL,   -- the first window of a new index version
    n              BIGINT    NOT NULL,   -- scored requests in the window
    baseline_start TIMESTAMP,
    baseline_end   TIMESTAMP,
    baseline_n     BIGINT,
    value          DOUBLE,
    baseline_value DOUBLE,
    delta          DOUBLE,               -- value - baseline_value
    delta_low      DOUBLE,
    delta_high     DOUBLE,
    margin         DOUBLE    NOT NULL,   -- delta: a drop counts only below -margin
    method         VARCHAR   NOT NULL,
    evidence       DOUBLE,               -- e-value (anytime) or p-value (fixed) of the decision
    decision       VARCHAR   NOT NULL,   -- drop | rise | stable | insufficient | baseline
    state          VARCHAR   NOT NULL,   -- opened | ongoing | resolved | none
    episode_id     VARCHAR,
    min_detectable_delta DOUBLE,         -- the smallest drop detected with 80 % power
    n_needed       BIGINT,               -- requests needed to detect detectable_drop (fixed: in one
                                         -- window; anytime: more, pooled from now on)
    built_with     VARCHAR   NOT NULL    -- the drift settings the row was computed with
);

-- One row per alert message and channel: an episode's opening or resolution, delivered or
-- not. Channel names only: URLs, tokens and passwords are never stored.
CREATE TABLE IF NOT EXISTS alerts (
    episode_id   VARCHAR   NOT NULL,
    event        VARCHAR   NOT NULL,   -- opened | resolved | withdrawn | unresolved
    channel      VARCHAR   NOT NULL,   -- webhook | slack | email
    status       VARCHAR   NOT NULL,   -- sent | failed | past (never sent: alert_channels)
    attempts     INTEGER   NOT NULL,
    last_error   VARCHAR,              -- why the last attempt failed, without secrets
    first_tried  TIMESTAMP NOT NULL,
    last_tried   TIMESTAMP NOT NULL,
    slice        VARCHAR   NOT NULL,
    metric       VARCHAR   NOT NULL,
    window_start TIMESTAMP NOT NULL    -- the window whose drift row holds the event
);

-- Added later (NULL in the rows of earlier warehouses): with slice, metric and window_start
-- they name the event whichever gold set judged it, so a new gold version that finds the same
-- episode sends nothing again (sql/pending_alerts.sql).
ALTER TABLE alerts ADD COLUMN IF NOT EXISTS route VARCHAR;

ALTER TABLE alerts ADD COLUMN IF NOT EXISTS k INTEGER;

-- Added later still (NULL in earlier rows): the gold version that judged the episode and its
-- direction (drop | rise), so that an alerted opening whose episode the drift step no longer
-- finds, judging the same window under the same gold version, is withdrawn by a message of its
-- own (event 'withdrawn', sql/pending_alerts.sql). Rows without them are never withdrawn.
ALTER TABLE alerts ADD COLUMN IF NOT EXISTS gold_version VARCHAR;

ALTER TABLE alerts ADD COLUMN IF NOT EXISTS direction VARCHAR;

-- Added later still: the recipients of a mail the server refused while taking it for the
-- others; its retries go to them alone, so nobody gets a page twice (NULL: all, or none).
ALTER TABLE alerts ADD COLUMN IF NOT EXISTS undelivered_to VARCHAR[];

-- One row per alert channel: when alerting began on it, in the data's time (the end of the
-- last window drift had judged at the first `alert` that had it; an earlier release stored
-- the clock's time of that call). The
-- events of an episode that had resolved by then are recorded in `alerts` as `past`, never
-- sent: setting up a channel on a warehouse with history pages only what is still open.
CREATE TABLE IF NOT EXISTS alert_channels (
    channel VARCHAR   NOT NULL,   -- webhook | slack | email
    since   TIMESTAMP NOT NULL    -- UTC
);

-- Public. One row per data-quality check of an interval [interval_start, interval_end) and
-- stage: 'files', the interval's log files before they are loaded (a blocking failure keeps
-- them out of the warehouse), or 'loaded', warnings read from the warehouse after ingest and
-- scoring. Written by pipeline/quality.py, which replaces an interval's rows of a stage.
CREATE TABLE IF NOT EXISTS quality_checks (
    interval_start TIMESTAMP NOT NULL,
    interval_end   TIMESTAMP NOT NULL,
    stage          VARCHAR   NOT NULL,   -- files | loaded
    check_name     VARCHAR   NOT NULL,   -- e.g. 'request_id unique'
    blocking       BOOLEAN   NOT NULL,   -- a failure stops the interval; else a warning
    success        BOOLEAN   NOT NULL,
    observed       VARCHAR,              -- what was found, e.g. '3 duplicates' or '0.020'
    example        VARCHAR,              -- one offending record, e.g. 'r-17'
    detail         VARCHAR   NOT NULL,   -- one line for people
    checked_at     TIMESTAMP NOT NULL
);

-- The LLM judge's verdicts (pipeline/judge.py), a cache: one row per judged set of claims
-- against one set of retrieved contexts, under one model, prompt version and language, so that
-- re-runs and backfills over unchanged retrievals cost no calls. Only 'ok' rows are reused; a
-- 'failed' row is judged again by the next run. Written one row at a time by the one writer as
-- verdicts arrive. No API key or endpoint is stored.
CREATE TABLE IF NOT EXISTS judge_verdicts (
    verdict_key    VARCHAR   NOT NULL,   -- sha256 of model, prompt version, lang, claims, contexts
    model          VARCHAR   NOT NULL,
    prompt_version VARCHAR   NOT NULL,
    lang           VARCHAR   NOT NULL,   -- en | de | fr
    claims         VARCHAR[] NOT NULL,
    attributed     BOOLEAN[],            -- per claim, in order; NULL unless status = 'ok'
    reasons        VARCHAR[],            -- the judge's reason per claim; NULL unless 'ok'
    tokens         BIGINT    NOT NULL,   -- prompt + completion tokens of every call made
    calls          INTEGER   NOT NULL,   -- HTTP calls made (retries and re-asks included)
    status         VARCHAR   NOT NULL,   -- ok | failed
    error          VARCHAR,              -- why it failed, without secrets
    created_at     TIMESTAMP NOT NULL,
    contexts       VARCHAR[]             -- the retrieved contexts judged, in order (for audits)
);

-- Added after the first verdicts were cached: their rows get NULL (an audit sample shows no
-- contexts for them).
ALTER TABLE judge_verdicts ADD COLUMN IF NOT EXISTS contexts VARCHAR[];

-- Human labels of a sample of the judge's claim verdicts (pipeline/audit.py), to measure how
-- far the judge agrees with people. One row per labelled claim (verdict_key, claim_no); a new
-- import replaces earlier labels of the same claims. The judge's label, model and language are
-- copied from judge_verdicts when the label is stored, so the audit outlives the cache.
CREATE TABLE IF NOT EXISTS audit_labels (
    verdict_key VARCHAR   NOT NULL,   -- judge_verdicts.verdict_key
    claim_no    INTEGER   NOT NULL,   -- 1-based place of the claim in the verdict
    model       VARCHAR   NOT NULL,
    lang        VARCHAR   NOT NULL,
    judge       BOOLEAN   NOT NULL,   -- the judge's attributed
    human       BOOLEAN   NOT NULL,   -- the person's attributed
    source      VARCHAR   NOT NULL,   -- the labels file it came from
    labelled_at TIMESTAMP NOT NULL    -- when it was imported (UTC)
);

-- The claims of each golden's reference answer, fixed per gold-set version so that the
-- denominator of claims recall never changes between runs (pipeline/claims.py): the gold
-- file's claims, else the reference split once by the judge, or a person's correction
-- (`recallwatch claims import`). A golden has rows here once, and keeps them until imported.
CREATE TABLE IF NOT EXISTS golden_claims (
    gold_version VARCHAR NOT NULL,
    gold_id      VARCHAR NOT NULL,
    claim_no     INTEGER NOT NULL,   -- 1-based order of the claim in the reference
    claim        VARCHAR NOT NULL,
    source       VARCHAR NOT NULL    -- gold | judge | import
);

-- The configuration in force: cutoffs and pass mark (set by the last score/aggregate that was
-- given them), and the warehouse format. Steps default to it.
CREATE TABLE IF NOT EXISTS settings (
    name  VARCHAR NOT NULL,
    value VARCHAR NOT NULL
);

-- What each scored day window was scored with, so that `run` can tell which days a new gold
-- set, manifest or set of cutoffs left out of date. One row per route and day.
CREATE TABLE IF NOT EXISTS score_windows (
    route        VARCHAR   NOT NULL,
    day          TIMESTAMP NOT NULL,   -- the UTC day the window lies in
    gold_version VARCHAR   NOT NULL,
    cutoffs      VARCHAR   NOT NULL,   -- e.g. '1,3,5,10'
    manifests    VARCHAR   NOT NULL,   -- the day's manifests when scored (sql/day_manifests.sql)
    route_inputs VARCHAR               -- what else the route's scores depend on when scored
                                       -- (claims: the imported claims; '' on other routes)
);

-- Added after the first warehouses were written: their days get NULL, so the next run
-- rescores them (with precision from relevant chunks, and claims measured from the whole
-- served context on).
ALTER TABLE score_windows ADD COLUMN IF NOT EXISTS route_inputs VARCHAR;

-- The quarantine reason of a copy that contradicts a loaded request. Written by
-- sql/load_logs.sql and matched by sql/rejudge_candidates.sql / rejudge_conflicts.sql, so it
-- is spelled here once.
CREATE OR REPLACE MACRO conflict_reason(request_id, source, line) AS
    'conflicts with request_id ' || request_id || ' already loaded from ' || source
    || ' line ' || line;

-- A text that holds something, else NULL: blank ('', spaces, tabs, line breaks; the
-- characters Python's str.strip() removes, which DuckDB's trim leaves) is no text. A chunk's
-- blank logged text gives way to its manifest text; a blank claim is no claim.
CREATE OR REPLACE MACRO text_or_null(t) AS
    CASE WHEN regexp_full_match(t, '[\s\p{Z}\x{0B}\x{1C}-\x{1F}\x{85}]*') THEN NULL ELSE t END;

-- Text without the blank characters text_or_null reads as blank at its ends, as Python's
-- str.strip() gives it (claims split by the judge and imported are stripped so).
CREATE OR REPLACE MACRO stripped_text(t) AS
    regexp_replace(t, '^[\s\p{Z}\x{0B}\x{1C}-\x{1F}\x{85}]+|[\s\p{Z}\x{0B}\x{1C}-\x{1F}\x{85}]+$',
                   '', 'g');

-- A manifest chunk's content as it is matched across index versions (sql/carry_gold_ids.sql,
-- sql/carry_named_gold.sql): its content_hash and the sha256 of its text, those given.
CREATE OR REPLACE MACRO chunk_hashes(content_hash, text) AS
    list_filter([content_hash, sha256(text)], lambda h: h IS NOT NULL);

-- An index version as it sorts among others: each run of digits as a number (idx-v9 before
-- idx-v10; dates in order), the rest as text.
CREATE OR REPLACE MACRO version_order(v) AS
    array_to_string(list_transform(regexp_extract_all(v, '[0-9]+|[^0-9]+'),
        lambda p: CASE WHEN regexp_full_match(p, '[0-9]+') AND length(p) < 40
                       THEN lpad(p, 40, '0') ELSE p END), '');

-- How a gold chunk is compared on another index version, from whether its content is known
-- and the chunks there that hold it (NULL: none): unknown (compared as itself), same_id (the
-- ID holds it there: as itself only), content_hash (as each chunk holding it), gone (as
-- nothing: always a miss). carried_as: the IDs it is compared as, [NULL] when gone.
CREATE OR REPLACE MACRO carry_how(gold_chunk_id, known, chunks) AS
    CASE WHEN NOT known THEN 'unknown'
         WHEN list_contains(chunks, gold_chunk_id) THEN 'same_id'
         WHEN len(chunks) > 0 THEN 'content_hash'
         ELSE 'gone' END;
CREATE OR REPLACE MACRO carried_as(gold_chunk_id, known, chunks) AS
    CASE carry_how(gold_chunk_id, known, chunks)
         WHEN 'content_hash' THEN chunks
         WHEN 'gone' THEN [NULL]
         ELSE [gold_chunk_id] END;
