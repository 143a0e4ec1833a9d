"""The enumerated legal set of a learning search: its points as index tuples (a row per point,
in lexicographic order), which of them are used (told or pending), and where a point is in it.

A point is found by its position in the full product (mixed radix over each dimension's number
of values) and a binary search; a grid past 2**62 points (fifteen kernels' macros, a legal list
of a few thousand) has no int64 position, and a dict finds it instead. Pure numpy.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np


class LegalSet:
    """`rows`: the legal points' index tuples (any order, repeats allowed); `sizes`: each
    dimension's number of values."""

    def __init__(self, rows: np.ndarray, sizes: Sequence[int]):
        sizes = [int(n) for n in sizes]
        rows = np.asarray(rows, dtype=np.int64).reshape(-1, len(sizes))
        self._strides = (np.array([math.prod(sizes[j + 1:]) for j in range(len(sizes))], dtype=np.int64)
                         if math.prod(sizes) < 2 ** 62 else None)
        self._at: dict[tuple, int] | None = None
        if self._strides is not None:
            self._flat = np.unique(rows @ self._strides)          # sorted: lexicographic order
            self.rows = (self._flat[:, None] // self._strides[None, :]) % np.array(sizes)[None, :]
        else:
            self.rows = np.unique(rows, axis=0)
            self._at = {tuple(int(i) for i in k): n for n, k in enumerate(self.rows)}
        self.used = np.zeros(len(self.rows), dtype=bool)

    def index(self, key: Sequence[int]) -> int | None:
        """Where the set holds this point (None: not in it)."""
        if not len(self.rows):
            return None
        if self._at is not None:
            return self._at.get(tuple(int(i) for i in key))
        flat = int(np.dot(key, self._strides))
        i = int(np.searchsorted(self._flat, flat))
        return i if i < len(self._flat) and self._flat[i] == flat else None

    def mark(self, key: Sequence[int], used: bool) -> None:
        i = self.index(key)
        if i is not None:
            self.used[i] = used

    def free(self, key: Sequence[int]) -> bool:
        """In the set, and not used."""
        i = self.index(key)
        return i is not None and not self.used[i]

    def unused(self) -> np.ndarray:
        return self.rows[~self.used]
