"""The archiver: settled operations from Redis to the PostgreSQL evidence archive."""
