"""Domain logic. Functions take the session first and keyword-only arguments; they flush,
and the request or task boundary commits."""
