// Just enough XML for S3's answers: the text of named elements, with entity
// references decoded. S3 answers are small, flat and machine-written
// (ListBucketResult, InitiateMultipartUploadResult, Error), so a full parser
// is not needed; what is needed is care with escapes, because object keys
// come back escaped ("a&amp;b", "it&#39;s").
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cp::s3xml {

// The raw content of every <name>...</name> in `xml` (attributes allowed,
// <name/> is empty), in document order, not descending into a match.
// "Key" does not match <KeyCount>.
std::vector<std::string_view> elements(std::string_view xml, std::string_view name);

// The decoded text of the first such element, or nullopt when there is none.
std::optional<std::string> text(std::string_view xml, std::string_view name);

// Decodes &amp; &lt; &gt; &quot; &apos; &#NN; &#xHH; (as UTF-8) and CDATA
// sections. An '&' that starts no known reference is kept as it is.
std::string decode(std::string_view raw);

// Escapes & < > " ' for element text.
std::string escape(std::string_view s);

// The name of the document's root element ("Error", "ListBucketResult"), or "".
std::string root_name(std::string_view xml);

}  // namespace cp::s3xml
