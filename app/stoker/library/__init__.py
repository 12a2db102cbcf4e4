"""The models: GGUF headers, the library and other tools' stores, the catalog of ids, pulls from the hub and removal."""
