"""The catalogue's entries, one module per family of failure (stoker/diagnosis/catalogue.py joins
them and indexes them): each wording with the kind it proves, its source, its rank and strength."""
