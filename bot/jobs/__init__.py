"""Jobs: the store (SQLAlchemy), explicit states and stages, and the runner that drives one job."""
