mod manifest;
