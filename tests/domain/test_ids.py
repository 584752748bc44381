"""Ids as tables show them (issue 50.4): the shortest prefix of 12 or more that no other
id shown shares, as git abbreviates hashes."""

from flux.domain.ids import SHORT_ID, unique_prefixes


def test_twelve_digits_unless_two_ids_share_them():
    a, b, c = "3f2a1b2c" + "0" * 24, "3f2a1b2c0000" + "1" * 20, "77aa" + "9" * 28
    shown = unique_prefixes([a, b, c])
    assert shown[c] == c[:SHORT_ID]
    assert shown[a] == a[:13] and shown[b] == b[:13]  # they share 12: one more tells them apart
    assert unique_prefixes([a, a]) == {a: a[:SHORT_ID]}  # the same id twice is one id
    assert unique_prefixes(["abc", "abcdef"], least=2) == {"abc": "abc", "abcdef": "abcd"}
