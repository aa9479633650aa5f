"""Providers produce an answer for a case: recorded fixtures, HTTP models, or the team's app."""
