"""The SQL source of truth: tables, migrations, transactions and the event log."""
