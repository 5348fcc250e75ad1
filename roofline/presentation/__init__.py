"""Presentation: tables, plots and the command line."""
