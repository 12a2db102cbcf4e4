"""What every room may use: the user-fixable error, Stoker's folders, JSON files that survive
crashes, its own log, the keyring."""
