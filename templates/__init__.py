"""Jinja2 templates shipped as package data (prompts, PR bodies, comments, dashboard pages)."""
