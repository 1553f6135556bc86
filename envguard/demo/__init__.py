"""What `envguard demo` builds: wheels, the incident, a compile cache; also the tests' builders."""
