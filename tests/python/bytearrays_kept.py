"""Keeps four 1 MiB bytearrays to the end (issue 23): memscope's "where" answers for a
`--adapters host --call-stack c:16,python:8` run name the line below, not CPython's allocator."""

kept = []


def grow(n):
    for _ in range(n):
        kept.append(bytearray(1 << 20))  # the line the answers name


def main():
    grow(4)
    print("kept", len(kept))


main()
