"""GitHub through PyGithub, as an App: JWT, installation tokens, the REST calls the bot makes, and git push."""
