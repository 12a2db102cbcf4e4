"""Effects: each module wraps one library or OS concern. Never imports Qt."""
