"""The operations behind the commands: ``pdtp`` (leave-one-out audit) and ``reduce`` (reduce-dtp)."""
