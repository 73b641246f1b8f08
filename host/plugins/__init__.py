"""The host's side of game plugins: the registry (pluggy), each game's codec and published
contract, the guards against game faults, the hook specs."""
