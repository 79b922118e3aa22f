# targets: Err.__init__
# Two `__init__`s in one file whose code has no first line (both call `super()`: 3.15's entry
# probe says line 0), the untargeted one called by the targeted one, as yt-dlp's
# `ExtractorError.__init__` calls `YoutubeDLError.__init__` (flux-gen-v2: two yt-dlp modules
# refused). Under scope "targets" the untargeted one's USDT entry was dropped as the target's
# (`target-entries`), so its return closed the target's activation and the hook's return of
# the target found none open: "hook return of Err.__init__ with no open activation".


class Base(Exception):
    msg = None

    def __init__(self, msg=None):
        if msg is not None:
            self.msg = msg
        super().__init__(self.msg)


class Err(Base):
    def __init__(self, msg, cause=None):
        self.cause = cause
        super().__init__("[%s] %s" % (type(self).__name__, msg))


class Plain(Base):
    pass


def lookup(table, key):
    try:
        return table[key]
    except KeyError as e:
        raise Err("no %r" % (key,), cause=e)


def test_wrapped_errors():
    seen = []
    for key in ("a", "b", "c"):
        try:
            lookup({"a": 1}, key)
        except Err as e:
            seen.append(str(e))
    assert seen == ["[Err] no 'b'", "[Err] no 'c'"]


def test_untargeted_init_alone():
    assert str(Plain("x")) == "x"
    assert str(Err("y")) == "[Err] y"
