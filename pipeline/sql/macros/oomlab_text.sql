-- Text with surrounding blanks removed; an empty value is NULL.
CREATE OR REPLACE MACRO oomlab_text(v) AS nullif(trim(CAST(v AS VARCHAR)), '');
