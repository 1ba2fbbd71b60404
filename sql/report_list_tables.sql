-- report_list_tables: the tables and views of the open warehouse, so the report can say which
-- of the tables it reads are missing (recall_at_k is a view over request_cutoffs).
-- Grain: one row per table or view of the current database. No parameters.

SELECT table_name FROM information_schema.tables
WHERE table_catalog = current_database()
