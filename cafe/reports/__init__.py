"""Reports: leaderboard.yaml, the paper's tables and figures, run reports."""
