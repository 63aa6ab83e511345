"""Scenario files: the schema (a core plus what each runner and kind registers), loading with
${VAR} expansion, and errors that name file, line and field."""
