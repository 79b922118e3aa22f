# targets: target
# Generator expressions of untargeted code run inside an extent of targeted code, as SymPy's
# `all(... for ...)` in `deduce_all_facts` and `is_number` run under `Add.flatten` (issue 28).
# On 3.15 flux left genexprs to USDT under scope "targets": USDT fires no entry when close()
# resumes one (all() stopping early abandons it; with PY_THROW on, CPython throws
# GeneratorExit into it and USDT reports its return), so the trace was incomplete; and USDT's
# entries cannot tell a genexpr's start from its resumptions, so each resumption read as a
# fresh call. Covered: an early stop, an exhausted genexpr, the same genexpr code nested by
# recursion, one created untargeted and started by the targeted code, one closed by hand.


class Node:
    def __init__(self, *args, value=1):
        self.args = args
        self.value = value

    def positive(self):
        return self.value > 0 and all(a.positive() for a in self.args)

    def deduce(self, rules):
        out = []
        for cond, impl in rules:
            if all(getattr(self, k) == v for k, v in cond):
                out.append(impl)
        return out


def values(node):
    return (a.value for a in node.args)


def target(node, rules):
    found = node.deduce(rules)
    ok = node.positive()
    vals = values(node)
    first = next(vals)
    rest = sum(vals)
    more = values(node)
    next(more)
    more.close()
    return found, ok, first + rest


def test_genexprs_in_callees():
    leaf = Node(value=2)
    bad = Node(value=-1)
    tree = Node(Node(leaf, leaf), Node(leaf), bad, value=3)
    rules = [((("value", 3),), "three"), ((("value", 1), ("args", ())), "one"), ((), "any")]
    for _ in range(2):
        assert target(tree, rules) == (["three", "any"], False, 1)
