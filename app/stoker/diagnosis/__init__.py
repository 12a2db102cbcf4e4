"""What went wrong: failure classification from engine logs, build blockers, the incidents ledger
and the OOM evidence."""
