"""check, the CI gate. Its rules (rules.py), the budget grammar and its families (budgets.py,
speculation_budgets.py), and its defaults (defaults.py, light enough for api.check's signature)."""
