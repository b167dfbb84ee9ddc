"""check, the CI gate: its rules (rules.py); the budget grammar with the one list of families
(grammar.py), the families (budgets.py, speculation_budgets.py); its defaults (defaults.py, light
enough for api.check's signature)."""
