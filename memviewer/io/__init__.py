"""Importers and exporters."""
