"""The Chroma collections: chunks with their vectors, and each paper's sentence vectors.

`collection`: the one module that talks to Chroma (`Store`); `format`: what a record holds and
how the layout is versioned; `indexes`: the indexes' names and sizes; `check`: the segment
checks that tell damage from a full disk, and what a failure inside Chroma tells the user;
`client`: opening Chroma, its failures made IndexStoreErrors; `imports`: importing chromadb.
"""

from rag.store.collection import Chunk, Store, all_index_sizes, index_error
from rag.store.format import fingerprint
from rag.store.indexes import collection_name

__all__ = ["Chunk", "Store", "all_index_sizes", "collection_name", "fingerprint", "index_error"]
