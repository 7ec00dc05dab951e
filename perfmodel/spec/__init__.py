"""What the user states: units, errors, hardware, model, scenario, software stack, profiles."""
