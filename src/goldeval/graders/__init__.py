"""Hard and soft graders. Built-ins register through the same hook as third-party graders."""
