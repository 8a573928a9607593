import compactlab


def test_public_surface_is_explicit():
    assert sorted(compactlab.__all__) == sorted(set(compactlab.__all__))
    for name in compactlab.__all__:
        assert hasattr(compactlab, name), name
    public = {n for n in dir(compactlab) if not n.startswith("_")}
    modules = {n for n in public if type(getattr(compactlab, n)).__name__ == "module"}
    assert public - modules == set(compactlab.__all__) - {"__version__"}
