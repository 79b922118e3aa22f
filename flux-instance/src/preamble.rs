//! The shared conventions of generated questions (issue 24.2): one versioned preamble per kind
//! family, defined here once, sent once per conversation (the system prompt, `flux eval`) and
//! shipped with the dataset (`flux export --format hf`), so each question's body only says
//! what to compute.
//!
//! A generated instance records the preamble it was written against (`preamble =
//! "loops@1"` in `instance.toml`); loading it checks that this flux still has that
//! preamble, so a change to a preamble's text, which must bump its version, is visible: the
//! instances written against the old text stop loading until they are re-authored (`flux gen
//! --reauthor`). The preamble plus the question define the answer exactly: what a question
//! used to repeat (what a line event is, how values are rendered, what counts as an iteration,
//! a call, a raise) is here, word for word what the long questions said.
use flux_extract::QuestionKind;

/// A family's conventions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Preamble {
    /// `control-flow`, `loops`, `state`, `data-flow`, `exceptions`, `calls`, `invariants`.
    pub family: &'static str,
    /// Bumped whenever `text` changes in a way that could change an answer.
    pub version: u32,
    /// The conventions, in English (Markdown).
    pub text: &'static str,
}

impl Preamble {
    /// `family@version`, what an instance records.
    pub fn id(&self) -> String {
        format!("{}@{}", self.family, self.version)
    }
}

/// The part every family shares: how the tests run, how functions, invocations and lines are
/// named, how values are rendered.
macro_rules! common {
    () => {
        "Conventions of flux's questions (a question names the repository, its version and \
         Python version, the tests and the function it asks about; these rules apply unless the \
         question says otherwise).\n\n\
         - Running the tests: each named test is a pytest node id of the repository's own test \
         suite. A question about one test runs that test by itself with pytest; a question \
         about several runs them together with pytest, in the order given, and lists answers \
         per test in that order. Test ids and file paths are relative to the directory pytest \
         runs from: the top directory of the repository's source tree (for a package installed \
         without its tree, the directory that holds the package).\n\
         - Functions are named by their qualified name (`__qualname__`: `Class.method`, \
         `f.<locals>.g`) and the file that defines them. Line numbers are absolute line numbers \
         of that file.\n\
         - The k-th invocation of a function in a test is the k-th call of it to start during \
         that test (invocations counted in the order they start; \"first\" is 1).\n\
         - Lines are line events: the lines Python's line tracing reports for the function's \
         own frame. A statement spanning several lines may report more than one of them, and \
         the same line again (a call spanning lines reports its first line, then its argument \
         lines, then its first line again as the call is made). Lines of the functions it calls \
         are not its lines, nor are those of lambdas and generator expressions, which run in \
         frames of their own; under Python 3.11 and earlier neither are those of \
         comprehensions (also frames of their own there; later versions inline them). A line a \
         question names is the first line of its statement.\n\
         - Values are given as `repr()` strings, as a bounded tracer renders them: a repr longer \
         than 200 characters is cut to 200 and ends in `...`, containers nested deeper than 3 \
         levels show `...`, dict keys keep insertion order, and memory addresses show as `0x?` \
         (`<Foo object at 0x?>`). A local variable's value \"right after line L executes\" is \
         the frame's state when its next line starts, or when it returns.\n"
    };
}

/// The paragraph on direct calls, shared by `calls` (and worded as the long questions had it).
macro_rules! calls_rule {
    () => {
        "- Only functions defined in files under the directory the question names count. A \
         direct call is a call made by the function's own frame; calls made through built-ins \
         (`map`, `sorted(key=...)`, ...) count as made by it, and comprehensions, generator \
         expressions and lambdas are functions like any other (named like \
         `f.<locals>.<genexpr>`). Resuming a generator is not a call. Callees are named by \
         their qualified name.\n"
    };
}

/// Every family's preamble, in kind order.
pub const ALL: [Preamble; 7] = [
    Preamble {
        family: "control-flow",
        version: 1,
        text: concat!(
            common!(),
            "\nControl flow (S1, M1):\n\
             - An executed path lists the function's line events in execution order: a line \
             executed k times appears k times.\n\
             - Covered lines are the lines with at least one line event, sorted ascending, \
             each once, over all the function's invocations in the test (an empty list for a \
             test that never runs it).\n\
             - A test executes a line when the line has a line event in some invocation during \
             that test. `covering_tests` are the tests that execute it, `non_covering_tests` the \
             others, both in the order given.\n"
        ),
    },
    Preamble {
        family: "loops",
        version: 1,
        text: concat!(
            common!(),
            "\nLoops (S2, M2):\n\
             - A loop is named by its header line (the `for`, `async for` or `while` line) and \
             its body's lines; an `else:` clause is not part of the body.\n\
             - An iteration is one evaluation of the loop header that is followed by the \
             execution of a line of its body: the final evaluation that ends the loop is not an \
             iteration, and a `break` or `return` in the body ends the last one. Every entry \
             into the loop counts.\n\
             - A test's total is the number of iterations over all the function's invocations \
             during the test. Across tests, the smallest and largest totals are taken over the \
             tests in which the loop's header line executes, and the tests attaining each are \
             listed in the order given.\n"
        ),
    },
    Preamble {
        family: "state",
        version: 1,
        text: concat!(
            common!(),
            "\nProgram state (S3, M3):\n\
             - The state after the n-th execution of a line is read in the invocation the \
             question names, right after that execution.\n\
             - Across tests: for each test in which the line executes, the value right after \
             its first execution in that test; tests that never reach the line are left out; \
             tests in the order given.\n"
        ),
    },
    Preamble {
        family: "data-flow",
        version: 1,
        text: concat!(
            common!(),
            "\nData flow (S4, M4):\n\
             - A variable is defined at the first line of the function's definition for its \
             arguments (the question gives that line: the `def` line, or a decorated function's \
             first decorator's line), and at a line L when executing L changes its value (its \
             repr): an assignment that leaves the value unchanged is not a new definition, and \
             the earlier one stays current.\n\
             - Only the reads the question lists count as uses. Each execution of a use line \
             pairs the variable with its current definition line; a line's uses are taken \
             before its own definitions, so `x += 1` uses the previous definition of `x` and \
             then defines it.\n\
             - Report every (variable, def_line, use_line) pair observed, sorted by variable, \
             then def_line, then use_line: with the number of times it occurs (one invocation), \
             or with the tests in which it is observed, in the order given (across tests, any \
             invocation).\n"
        ),
    },
    Preamble {
        family: "exceptions",
        // 2: M5 may ask which tests an exception propagates out of a function in.
        version: 2,
        text: concat!(
            common!(),
            "\nExceptions (S5, M5):\n\
             - An exception is raised in a function when its own code raises it or a built-in \
             (C) function it calls raises it; one that only propagates into it from a Python \
             function it calls is not raised there. Exceptions the interpreter uses as signals \
             (`StopIteration`, `StopAsyncIteration`, `GeneratorExit`) are not asked about.\n\
             - Its message is `str()` of the exception; a message longer than 200 characters is \
             cut to 200 and ends in `...`. Its type is named as the question names it.\n\
             - An exception is followed only through the frames of the functions the question \
             lists (the functions traced line by line): if it propagates out of them it counts \
             as not handled (null handler and handler line); otherwise the handler is the \
             function whose `except` clause catches it, and the handler line that clause's \
             line. `unwound` lists the frames of these functions it exits, innermost first.\n\
             - Across tests: `crashing_tests` are the tests in which such an exception is raised \
             in the function (or, when the question asks in which tests an invocation of the \
             function ends by an exception propagating out of it, the tests in which one of its \
             invocations ends by such an exception, wherever it was raised), `safe_tests` the \
             others, both in the order given.\n"
        ),
    },
    Preamble {
        family: "calls",
        version: 1,
        text: concat!(
            common!(),
            "\nCalls (S6, M6, call graphs):\n",
            calls_rule!(),
            "- A call sequence lists the function's direct calls in the order they start, each \
             with the callee and the line of the caller executing when the call starts.\n\
             - Call counts list each callee once with its number of calls, sorted by name; \
             callees per test are sorted by name, each once, over all the function's invocations \
             during the test.\n\
             - A test's dynamic call graph (its setup and teardown included) maps each function \
             that calls one of the counted functions directly to the sorted list of the distinct \
             counted functions it calls, its keys sorted; a function that calls none of them is \
             not a key, and neither is a call from or to a function defined elsewhere.\n"
        ),
    },
    Preamble {
        family: "invariants",
        version: 1,
        text: concat!(
            common!(),
            "\nInvariants (S7, M7):\n\
             - The observations are the values of the named local variable right after each \
             execution of the named line, in every invocation, in execution order; executions \
             where it is unbound are skipped.\n\
             - Over the observations: `observations` is their number; `types` the distinct type \
             names (`type(v).__name__`), sorted; `single_type` whether there is exactly one; \
             `non_negative` whether every value is an int or float >= 0; `constant` whether all \
             reprs are equal; `monotonic` is \"constant\" if constant, else \"non_decreasing\" \
             or \"non_increasing\" if every value is an int or float and each is >= (or <=) the \
             one before, else \"none\".\n\
             - Across tests, `observations`, `types`, `single_type`, `non_negative` and \
             `constant` are over all the tests' observations together, while `monotonic` is \
             decided per test and combined: \"constant\" if every test's sequence is constant, \
             \"non_decreasing\" if each is constant or non_decreasing, likewise \
             \"non_increasing\", else \"none\". `tests` lists the tests with at least one \
             observation, in the order given.\n"
        ),
    },
];

/// The conventions of call-structure questions (S6, M6) about Java projects, traced by
/// HotSpot's method probes: the same questions as `calls`, asked of JUnit test methods and Java
/// methods (no lines: the probes report calls and returns only).
pub const JVM_CALLS: Preamble = Preamble {
    family: "jvm-calls",
    version: 1,
    text: "Conventions of flux's questions about Java projects (a question names the \
         repository, its version and Java version, the tests and the method it asks about; \
         these rules apply unless the question says otherwise).\n\n\
         - Running the tests: each named test is a test method of the repository's own JUnit \
         test suite, named by its test id `org/x/FooTest.java::FooTest::testBar`: the test \
         class's source file relative to the test sources' root, the class (nested classes \
         follow, each after `::`) and the method. It is run by JUnit's console launcher on the \
         compiled test classes, selected as `--select-method=org.x.FooTest#testBar`. A question \
         about one test runs that test method by itself; a question about several runs them \
         together, in the order given, and lists answers per test in that order. A test is the \
         activation of its test method (what runs before or after it, such as `@Before` \
         methods, is not part of it).\n\
         - Methods are named `Class.method`, without package or signature, nested classes \
         joined by `.` (`Outer.Inner.method`); a call graph names them with their package too \
         (`org.x.Outer.Inner.method`). Constructors are `<init>`, static initialisers \
         `<clinit>`, a lambda's body is a method of its class (`Foo.lambda$bar$0`), and the \
         overloads of a method are one method.\n\
         - The k-th invocation of a method in a test is the k-th call of it to start during that \
         test (invocations counted in the order they start; \"first\" is 1).\n\
         \nCalls (S6, M6, call graphs):\n\
         - Only methods of the classes in the package the question names and its subpackages \
         count (the project's main and test classes); a call into the JDK or another library is \
         not one, and a project method such code calls back (a comparator, a lambda a stream \
         runs) counts as called directly by the nearest project method running below it. A \
         direct call is one made by the method's own frame.\n\
         - A call sequence lists the method's direct calls in the order they start, one entry \
         per call, each naming the callee.\n\
         - Call counts list each callee once with its number of calls, sorted by name; callees \
         per test are sorted by name, each once, over all the method's invocations during the \
         test.\n\
         - A test's dynamic call graph maps each method that calls one of the counted methods \
         directly to the sorted list of the distinct counted methods it calls, its keys sorted; \
         a method that calls none of them is not a key.\n",
};

/// The preamble of a question of `kind` about a program on the JVM (`jvm`) or on CPython:
/// the JVM's questions are the call-structure kinds, under [`JVM_CALLS`].
pub fn for_runtime(kind: QuestionKind, jvm: bool) -> &'static Preamble {
    if jvm && kind.family() == "calls" {
        &JVM_CALLS
    } else {
        for_kind(kind)
    }
}

/// The preamble of `kind`'s family (`QuestionKind::family`: S1 and M1 share one, and so on).
/// Every family has one (a test checks each kind).
pub fn for_kind(kind: QuestionKind) -> &'static Preamble {
    let family = kind.family();
    ALL.iter()
        .find(|p| p.family == family)
        .unwrap_or_else(|| panic!("no preamble of the family `{family}` of {kind}"))
}

/// The preamble `family@version`, if this flux has it.
pub fn by_id(id: &str) -> Option<&'static Preamble> {
    ALL.iter()
        .chain(std::iter::once(&JVM_CALLS))
        .find(|p| p.id() == id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_a_family_and_ids_round_trip() {
        for k in QuestionKind::ALL {
            let p = for_kind(k);
            assert_eq!(by_id(&p.id()), Some(p));
            assert!(p.text.contains("Line numbers are absolute"), "{}", p.family);
        }
        let families: std::collections::BTreeSet<&str> = ALL.iter().map(|p| p.family).collect();
        assert_eq!(families.len(), ALL.len());
        assert_eq!(for_kind(QuestionKind::M2).id(), "loops@1");
        assert_eq!(by_id("loops@0"), None);
    }

    /// What the long questions repeated is in the family's preamble, once.
    #[test]
    fn each_family_defines_its_own_terms() {
        use QuestionKind as K;
        for (k, term) in [
            (K::S2, "An iteration is one evaluation of the loop header"),
            (K::S4, "`x += 1` uses the previous definition"),
            (K::S5, "innermost first"),
            (K::S6, "Resuming a generator is not a call"),
            (K::S7, "`monotonic` is decided per test"),
            (K::S3, "memory addresses show as `0x?`"),
        ] {
            assert_eq!(for_kind(k).text.matches(term).count(), 1, "{k:?}: {term}");
        }
    }

    /// A Java question's preamble is the JVM's (JUnit test ids, Java's method names), found by
    /// its id like the others, and only for the kinds a calls-only trace answers.
    #[test]
    fn java_call_questions_have_the_jvm_preamble() {
        use QuestionKind as K;
        assert_eq!(for_runtime(K::S6, true).id(), "jvm-calls@1");
        assert_eq!(for_runtime(K::M6, true), &JVM_CALLS);
        assert_eq!(for_runtime(K::S6, false).id(), "calls@1");
        assert_eq!(for_runtime(K::S1, true), for_kind(K::S1));
        assert_eq!(by_id("jvm-calls@1"), Some(&JVM_CALLS));
        for term in [
            "--select-method=",
            "`<init>`",
            "one entry per call",
            "nearest project method",
        ] {
            assert_eq!(JVM_CALLS.text.matches(term).count(), 1, "{term}");
        }
        assert!(!JVM_CALLS.text.contains("pytest"));
        assert!(ALL.iter().all(|p| p.family != JVM_CALLS.family));
    }
}
