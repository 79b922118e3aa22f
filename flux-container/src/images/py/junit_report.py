# flux: turns JUnit's XML reports (the console launcher's --reports-dir, legacy format: one
# <testsuite> per engine, a <testcase classname=... name=...> per test) into the JSON lines
# py/flux_testreport.py writes for pytest, so one reader counts both (images::suite::summarize):
#   {"collected": ID}  {"test": ID, "outcome": passed|failed|error|skipped}  {"finished": STATUS}
# ID is `<source file>::<Class>[::<Member>]::<name>` of the test's class (`org/x/FooTest.java::
# FooTest::testBar()`), the test ids of flux's JVM traces. Stdlib only.
#
#   junit_report.py REPORTS_DIR STATUS
import json
import os
import sys
import xml.etree.ElementTree as ET


def test_id(classname, name):
    pkg, _, simple = classname.rpartition(".")
    parts = simple.split("$")
    path = (pkg.replace(".", "/") + "/" if pkg else "") + parts[0] + ".java"
    return "::".join([path] + parts + [name])


def main(reports, status):
    out = sys.stdout
    for f in sorted(os.listdir(reports)):
        if not (f.startswith("TEST-") and f.endswith(".xml")):
            continue
        root = ET.parse(os.path.join(reports, f)).getroot()
        for case in root.iter("testcase"):
            tid = test_id(case.get("classname", ""), case.get("name", ""))
            outcome = "passed"
            for child in case:
                if child.tag == "failure":
                    outcome = "failed"
                elif child.tag == "error":
                    outcome = "error"
                elif child.tag == "skipped" and outcome == "passed":
                    outcome = "skipped"
            out.write(json.dumps({"collected": tid}) + "\n")
            out.write(json.dumps({"test": tid, "outcome": outcome}) + "\n")
    out.write(json.dumps({"finished": int(status)}) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
