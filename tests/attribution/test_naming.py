import pytest

from spanfix.attribution.naming import parse_step_name, relabel_step_name

# Every row of step-spans.md section 2: (old name, emitted by the draft runner?, new name).
SECTION_2 = [
    ("step[TARGET_VERIFY bs=2]", False, "step[VERIFY bs=2]"),
    ("step[TARGET_VERIFY bs=2 g_sq=6 g_sqsq=18 g_sqsk=90 g_sk=30]", False,
     "step[VERIFY bs=2 g_sq=6 g_sqsq=18 g_sqsk=90 g_sk=30]"),
    ("step[TARGET_VERIFY bs=2]", True, "step[DRAFT bs=2]"),
    ("step[DECODE bs=2 g_sq=8 g_sqsq=32 g_sqsk=120 g_sk=30]", True,
     "step[DRAFT bs=2 g_sq=8 g_sqsq=32 g_sqsk=120 g_sk=30]"),
    ("step[EXTEND bs=3 toks=30]", True, "step[DRAFT bs=3 toks=30]"),
    ("step[EXTEND bs=3 toks=30]", False, "step[EXTEND bs=3 toks=30]"),
    ("step[DRAFT_EXTEND_V2 bs=2 c_sq=5 c_sqsq=13 c_sqsk=93 c_sk=35]", True,
     "step[DRAFT bs=2 c_sq=5 c_sqsq=13 c_sqsk=93 c_sk=35]"),
    ("step[DECODE bs=4]", False, "step[DECODE bs=4]"),
    ("step[IDLE bs=0]", False, "step[IDLE bs=0]"),
    ("step[MIXED bs=3 c=1 g=2 c_sq=9 c_sk=9 c_sqsq=81 c_sqsk=81 g_sq=2 g_sk=40 g_sqsq=2 g_sqsk=40]", False,
     "step[MIXED bs=3 c=1 g=2 c_sq=9 c_sk=9 c_sqsq=81 c_sqsk=81 g_sq=2 g_sk=40 g_sqsq=2 g_sqsk=40]"),
    # Idempotence: names already in the newer form stay, whoever emitted them.
    ("step[VERIFY bs=2]", False, "step[VERIFY bs=2]"),
    ("step[VERIFY bs=2]", True, "step[VERIFY bs=2]"),
    ("step[DRAFT bs=2]", True, "step[DRAFT bs=2]"),
    ("step[DRAFT bs=3 toks=30]", False, "step[DRAFT bs=3 toks=30]"),
    # Spans not from ModelRunner.forward keep their names even when drafting.
    ("step[DRAFT_LOOP raw_bs=3 bs=4 topk=4]", True, "step[DRAFT_LOOP raw_bs=3 bs=4 topk=4]"),
    # Older EAGLE v1 draft extend.
    ("step[DRAFT_EXTEND bs=2]", True, "step[DRAFT bs=2]"),
]


@pytest.mark.parametrize("old, is_draft, new", SECTION_2)
def test_section_2_table(old, is_draft, new):
    assert relabel_step_name(old, is_draft=is_draft) == new
    assert relabel_step_name(new, is_draft=is_draft) == new


@pytest.mark.parametrize("name, mode, bs, toks, fields", [
    ("step[EXTEND bs=15 toks=15360]", "EXTEND", 15, 15360, {"bs": "15", "toks": "15360"}),
    ("step[DECODE bs=32]", "DECODE", 32, None, {"bs": "32"}),
    ("step[decode bs=4]", "DECODE", 4, None, {"bs": "4"}),
    ("step[prefill bs=2 toks=10]", "PREFILL", 2, 10, {"bs": "2", "toks": "10"}),
    ("step[DECODE smc-head-eager bs=4 toks=9]", "DECODE", 4, 9, {"bs": "4", "toks": "9"}),
    ("step[TARGET_VERIFY bs=2 c_sq=6 c_sk=30]", "TARGET_VERIFY", 2, None, {"bs": "2", "c_sq": "6", "c_sk": "30"}),
    ("step[DRAFT_LOOP raw_bs=3 bs=4 topk=4]", "DRAFT_LOOP", 4, None, {"raw_bs": "3", "bs": "4", "topk": "4"}),
    ("step[MIXED bs=3 c=1 g=2 g_sk=40 c_sq=9]", "MIXED", 3, None,
     {"bs": "3", "c": "1", "g": "2", "g_sk": "40", "c_sq": "9"}),
    ("step[IDLE bs=x]", "IDLE", None, None, {"bs": "x"}),
])
def test_grammar_variants_parse(name, mode, bs, toks, fields):
    step = parse_step_name(name)
    assert (step.mode, step.bs, step.toks, step.fields) == (mode, bs, toks, fields)


@pytest.mark.parametrize("name", [None, 3, "", "step", "step[", "step[]", "stepDECODE bs=1]", "xstep[DECODE bs=1]",
                                  "step[DECODE bs=1] ", "scheduler.run_batch"])
def test_non_step_names(name):
    assert parse_step_name(name) is None


def test_variant_renames():
    assert relabel_step_name("step[decode bs=4]", is_draft=True) == "step[DRAFT bs=4]"
    assert relabel_step_name("step[DECODE smc-head-eager bs=4 toks=9]", is_draft=True) == \
        "step[DRAFT smc-head-eager bs=4 toks=9]"
    assert relabel_step_name("step[TARGET_VERIFY bs=2 c_sq=6 c_sk=30]", is_draft=False) == \
        "step[VERIFY bs=2 c_sq=6 c_sk=30]"
    # A mode spanfix does not know is never rewritten.
    assert relabel_step_name("step[prefill bs=2 toks=10]", is_draft=True) == "step[prefill bs=2 toks=10]"


@pytest.mark.parametrize("rest, bs, toks", [
    (" bs=4 toks=9", 4, 9), (" bs=1 bs=2", 2, None), (" raw_bs=3 bs=4 topk=4", 4, None), (" bs=a", None, None),
    (" toks=1toks=2", None, None), ("\u00a0bs=5\ttoks=6", 5, 6), ("", None, None), (" xbs=1 btoks=2", None, None),
    (" bs=bs=3", None, None), (" toks=7 bs=8 toks=9", 8, 9),
])
def test_bs_and_toks_are_the_last_token_of_their_key(rest, bs, toks):
    step = parse_step_name(f"step[DECODE{rest}]")
    assert (step.bs, step.toks) == (bs, toks)
    # as the fields would give them, token by token
    fields = step.fields
    assert step.bs == (int(fields["bs"]) if fields.get("bs", "").lstrip("-").isdigit() else None)
