"""Pure parsers, one per source: raw text in, typed facts out, never an exception.

Each parser returns a small result object with a ``problems`` list; an empty result plus a problem
means the text was unreadable (recorded as ``unparsable`` in ``snapshot.errors``).
"""
