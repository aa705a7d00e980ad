"""Chat clients shared by API adapters, CAFE judges, captioners and MPAR² reward judges."""
