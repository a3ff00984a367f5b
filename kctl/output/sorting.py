"""`kubectl get --sort-by`: objects in the order of a JSONPath's values, as kubectl sorts them.

Strings in natural order (vbom.ml/util/sortorder, digit runs as numbers) or as quantities,
numbers numerically, missing values first, ties stable. Called by the `get` command.
"""

from __future__ import annotations

from kctl.machinery.errors import ClientSideError
from kctl.output.formats import relaxed_jsonpath

__all__ = ["sort_objects", "natural_less"]


def natural_less(a: str, b: str) -> bool:
    """vbom.ml/util/sortorder.NaturalLess, kubectl's order for strings: digit runs compare as numbers."""
    s1, s2 = a.encode(), b.encode()
    i = j = 0
    while i < len(s1) and j < len(s2):
        c1, c2 = s1[i], s2[j]
        d1, d2 = 48 <= c1 <= 57, 48 <= c2 <= 57
        if d1 != d2:
            return d1
        if not d1:
            if c1 != c2:
                return c1 < c2
            i += 1
            j += 1
            continue
        while i < len(s1) and s1[i] == 48:
            i += 1
        while j < len(s2) and s2[j] == 48:
            j += 1
        nz1, nz2 = i, j
        while i < len(s1) and 48 <= s1[i] <= 57:
            i += 1
        while j < len(s2) and 48 <= s2[j] <= 57:
            j += 1
        if i - nz1 != j - nz2:
            return i - nz1 < j - nz2
        if s1[nz1:i] != s2[nz2:j]:
            return s1[nz1:i] < s2[nz2:j]
        if nz1 != nz2:
            return nz1 < nz2
    return len(s1) < len(s2)


def _sort_less(a: object, b: object, field: str) -> bool:
    """kubectl's isLess on two decoded JSON values: numbers numerically, quantities as quantities."""
    if a is None and b is None:
        return False
    if a is None:
        return True
    if b is None:
        return False
    if isinstance(a, bool) and isinstance(b, bool):
        return not a and b
    if isinstance(a, (int, float)) and not isinstance(a, bool) and isinstance(b, (int, float)) \
            and not isinstance(b, bool):
        return a < b
    if isinstance(a, str) and isinstance(b, str):
        from kctl.machinery.quantity import parse_quantity

        try:
            qa, qb = parse_quantity(a), parse_quantity(b)
        except ValueError:  # not both quantities: natural string order
            return natural_less(a, b)
        return qa < qb
    raise ClientSideError(f"Field {field} is an unsortable type: {type(a).__name__}, "
                          f"or the values differ in type ({type(b).__name__})")


def sort_objects(objs: list[dict], sort_by: str) -> list[dict]:
    """`--sort-by`: objects ordered by the value of a JSONPath (`{.metadata.name}` or `.metadata.name`).

    As kubectl: strings in natural order (or as quantities when both are), numbers
    numerically, objects missing the field first, ties keep their order; an error if no
    object has the field.
    """
    import functools

    from kctl.output.jsonpath import parse_template

    field = relaxed_jsonpath(sort_by)
    template = parse_template(field)
    keyed = []
    found = False
    for obj in objs:
        values = template.values(obj)
        value = values[0] if values else None
        found = found or bool(values)
        keyed.append((value, obj))
    if objs and not found:
        raise ClientSideError(f"couldn't find any field with path \"{field}\" in the list of objects")

    def compare(x: tuple, y: tuple) -> int:
        if _sort_less(x[0], y[0], field):
            return -1
        if _sort_less(y[0], x[0], field):
            return 1
        return 0

    return [obj for _, obj in sorted(keyed, key=functools.cmp_to_key(compare))]
